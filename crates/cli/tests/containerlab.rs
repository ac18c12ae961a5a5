//! `qosnet lab export --containerlab`: the topology it writes is valid
//! against containerlab's published JSON Schema (tests/data, with its
//! source and licence), its YAML means the value qosnet built, every
//! scenario link is a containerlab link, and every qosnet node's config
//! loads and names an interface for each of its neighbours.

use std::path::Path;

use assert_cmd::Command;
use qosnet_live::node::NodeConfig;

fn export(scenario: &str, dir: &Path) -> serde_json::Value {
    let file = dir.join("lab.clab.yml");
    Command::cargo_bin("qosnet")
        .unwrap()
        .args(["lab", "export", "--containerlab"])
        .arg(&file)
        .arg(scenario)
        .assert()
        .success();
    let text = std::fs::read_to_string(&file).unwrap();
    serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn validate(topo: &serde_json::Value) {
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/clab.schema.json"))
            .unwrap(),
    )
    .unwrap();
    let v = jsonschema::validator_for(&schema).expect("containerlab's schema compiles");
    let errors: Vec<String> = v
        .iter_errors(topo)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}\n{topo:#}");
}

#[test]
fn exports_validate_against_containerlab_schema() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for (scenario, links) in [
        ("scenarios/live/line.toml", 2),
        ("scenarios/tdp-icc2006/tdp-1002.toml", 11),
        ("scenarios/diffserv-degeb/t1-edge.toml", 0),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = repo.join(scenario);
        let topo = export(path.to_str().unwrap(), dir.path());
        validate(&topo);
        let sc = qosnet_scenario::load_file(path.to_str().unwrap(), &[]).unwrap();
        let net = qosnet_scenario::topo::Network::build(&sc).unwrap();
        let n_links = topo["topology"]["links"].as_array().map(Vec::len).unwrap_or(0);
        if links > 0 {
            assert_eq!(n_links, links, "{scenario}");
        }
        assert_eq!(n_links, sc.links.len(), "{scenario}");
        let nodes = topo["topology"]["nodes"].as_object().unwrap();
        assert_eq!(nodes.len(), sc.nodes.len(), "{scenario}");
        let lab = topo["name"].as_str().unwrap();
        for (i, n) in sc.nodes.iter().enumerate() {
            let c = &nodes[&n.name];
            assert_eq!(c["labels"]["qosnet-node"], n.name.as_str());
            if n.is_host() {
                let exec = c["exec"].as_array().unwrap();
                let ip = net.nodes[i].ifaces[0].ip.to_string();
                assert!(exec.iter().any(|e| e.as_str().unwrap().contains(&ip)), "{c}");
                continue;
            }
            // The node config it runs loads and places every port.
            let cfg = dir.path().join(format!("qosnet-{lab}/{}.toml", n.name));
            let nc = NodeConfig::from_file(&cfg).unwrap();
            let places = nc
                .places(&sc, &net, i)
                .unwrap_or_else(|e| panic!("{}: {e}", cfg.display()));
            assert_eq!(places.len(), net.nodes[i].ifaces.len());
            let cmd = c["cmd"].as_str().unwrap();
            assert!(
                cmd.contains(&format!("--config /qosnet/{}.toml", n.name)),
                "{cmd}"
            );
        }
    }
}

/// A value the schema refuses is refused: the validation is not vacuous.
#[test]
fn schema_rejects_a_broken_topology() {
    let dir = tempfile::tempdir().unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut topo = export(
        repo.join("scenarios/live/line.toml").to_str().unwrap(),
        dir.path(),
    );
    topo["topology"]["nodes"]["R"]["kind"] = "qosnet".into();
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/clab.schema.json"))
            .unwrap(),
    )
    .unwrap();
    assert!(!jsonschema::is_valid(&schema, &topo));
}

/// A shared CSMA/CD segment has no containerlab equivalent: refused with
/// the reason, nothing half written.
#[test]
fn segments_are_refused_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::cargo_bin("qosnet")
        .unwrap()
        .args(["lab", "export", "--containerlab"])
        .arg(dir.path().join("s.clab.yml"))
        .arg(repo.join("scenarios/ethernet/saturation.toml"))
        .assert()
        .failure()
        .get_output()
        .stderr
        .clone();
    assert!(String::from_utf8_lossy(&out).contains("shared segment"));
    assert!(!dir.path().join("s.clab.yml").exists());
}
