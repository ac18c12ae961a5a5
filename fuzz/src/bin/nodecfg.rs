//! AFL++ harness for qosnet's `nodecfg` fuzz target (see crates/fuzz). Run
//! alone, it reads one input from standard input: `nodecfg < FILE` replays a
//! crash.
fn main() {
    afl::fuzz!(|data: &[u8]| qosnet_fuzz::nodecfg(data));
}
