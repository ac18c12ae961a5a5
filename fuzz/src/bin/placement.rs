//! AFL++ harness for qosnet's `placement` fuzz target (see crates/fuzz). Run
//! alone, it reads one input from standard input: `placement < FILE` replays a
//! crash.
fn main() {
    afl::fuzz!(|data: &[u8]| qosnet_fuzz::placement(data));
}
