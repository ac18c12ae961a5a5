//! AFL++ harness for qosnet's `node` fuzz target (see crates/fuzz). Run
//! alone, it reads one input from standard input: `node < FILE` replays a
//! crash.
fn main() {
    // Before the fork server: one-time set-up is not redone per restart.
    qosnet_fuzz::warm_up("node");
    afl::fuzz!(|data: &[u8]| qosnet_fuzz::node(data));
}
