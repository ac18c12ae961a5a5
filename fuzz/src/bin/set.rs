//! AFL++ harness for qosnet's `set` fuzz target (see crates/fuzz). Run
//! alone, it reads one input from standard input: `set < FILE` replays a
//! crash.
fn main() {
    // Before the fork server: one-time set-up is not redone per restart.
    qosnet_fuzz::warm_up("set");
    afl::fuzz!(|data: &[u8]| qosnet_fuzz::set(data));
}
