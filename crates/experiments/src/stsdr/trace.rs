//! A user's packet capture as the packet-size trace of the fairness tables
//! (`qosnet reproduce stsdr --set trace=FILE.pcap`). The reader is the
//! scenario crate's (`qosnet_scenario::sizetrace`), shared with flows'
//! `size = "pcap:FILE"`.

use std::path::Path;

pub use qosnet_scenario::sizetrace::SizeTrace;

/// Read `path` as a size trace (see [`qosnet_scenario::sizetrace::read`]).
pub fn read(path: &Path) -> anyhow::Result<SizeTrace> {
    qosnet_scenario::sizetrace::read(path).map_err(anyhow::Error::msg)
}
