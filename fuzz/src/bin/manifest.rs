//! AFL++ harness for qosnet's `manifest` fuzz target (see crates/fuzz). Run
//! alone, it reads one input from standard input: `manifest < FILE` replays a
//! crash.
fn main() {
    afl::fuzz!(|data: &[u8]| qosnet_fuzz::manifest(data));
}
