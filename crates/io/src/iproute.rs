//! The `ip` command (iproute2): run it with its exit status checked and
//! its stderr in the error, and read its JSON output (`ip -j`) rather than
//! scraping the text meant for people. Labs build everything with it
//! (each step a command a person could type); devices ask it what is
//! attached to an interface.

use std::process::{Command, Stdio};

/// Why an `ip` command did not give its output.
#[derive(Debug, thiserror::Error)]
pub enum IpError {
    #[error("`{cmd}` failed ({status}): {stderr}")]
    Failed {
        cmd: String,
        status: String,
        stderr: String,
    },
    #[error("running `{cmd}`: {source}")]
    Spawn {
        cmd: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{cmd}` printed no JSON: {source}")]
    Json {
        cmd: String,
        #[source]
        source: serde_json::Error,
    },
}

impl From<IpError> for std::io::Error {
    fn from(e: IpError) -> std::io::Error {
        std::io::Error::other(e.to_string())
    }
}

/// Run `ip ARGS`; its stdout on success.
pub fn ip(args: &[&str]) -> Result<String, IpError> {
    let cmd = format!("ip {}", args.join(" "));
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| IpError::Spawn {
            cmd: cmd.clone(),
            source,
        })?;
    if !out.status.success() {
        return Err(IpError::Failed {
            cmd,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Run `ip -j ARGS` and parse what it prints.
pub fn ip_json(args: &[&str]) -> Result<serde_json::Value, IpError> {
    let mut all = vec!["-j"];
    all.extend_from_slice(args);
    let text = ip(&all)?;
    serde_json::from_str(&text).map_err(|source| IpError::Json {
        cmd: format!("ip {}", all.join(" ")),
        source,
    })
}

/// The id of the XDP program on the interface `link` describes (one
/// element of `ip -j -d link show`'s array), if any: `xdp.prog.id` when
/// one program is attached, `xdp.attached[].prog.id` when several are.
pub fn xdp_prog_id(link: &serde_json::Value) -> Option<u32> {
    let xdp = link.get("xdp")?;
    let id = |v: &serde_json::Value| v.get("prog")?.get("id")?.as_u64();
    id(xdp)
        .or_else(|| xdp.get("attached")?.as_array()?.iter().find_map(id))
        .and_then(|v| u32::try_from(v).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xdp_prog_ids_read_from_ip_json() {
        let one: serde_json::Value = serde_json::from_str(
            r#"{"ifindex":3,"ifname":"eth0","xdp":{"mode":2,"prog":{"id":42,"name":"qosnet_xsk","tag":"abc","jited":1}}}"#,
        )
        .unwrap();
        assert_eq!(xdp_prog_id(&one), Some(42));
        let multi: serde_json::Value = serde_json::from_str(
            r#"{"ifname":"eth0","xdp":{"mode":4,"attached":[{"mode":2,"prog":{"id":7}},{"mode":1,"prog":{"id":8}}]}}"#,
        )
        .unwrap();
        assert_eq!(xdp_prog_id(&multi), Some(7));
        let none: serde_json::Value = serde_json::from_str(r#"{"ifname":"eth0","mtu":1500}"#).unwrap();
        assert_eq!(xdp_prog_id(&none), None);
        let bad: serde_json::Value = serde_json::from_str(r#"{"xdp":{"prog":{"id":"x"}}}"#).unwrap();
        assert_eq!(xdp_prog_id(&bad), None);
    }

    #[test]
    fn a_failing_command_says_what_failed() {
        let e = ip(&["link", "show", "dev", "qosnet-no-such-if0"]).unwrap_err();
        match e {
            IpError::Failed { cmd, stderr, .. } => {
                assert_eq!(cmd, "ip link show dev qosnet-no-such-if0");
                assert!(!stderr.is_empty());
            }
            // No iproute2 here at all.
            IpError::Spawn { .. } => {}
            other => panic!("{other}"),
        }
    }
}
