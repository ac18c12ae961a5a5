//! AFL++ harness for qosnet's `frame` fuzz target (see crates/fuzz). Run
//! alone, it reads one input from standard input: `frame < FILE` replays a
//! crash.
fn main() {
    // Before the fork server: one-time set-up is not redone per restart.
    qosnet_fuzz::warm_up("frame");
    afl::fuzz!(|data: &[u8]| qosnet_fuzz::frame(data));
}
