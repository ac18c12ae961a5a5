//! Checks of the names config files hand to the kernel: interface names
//! and network namespace names. Refused at parse time, with what Linux
//! accepts, rather than by a netlink call halfway through building a lab.

use crate::iface::IFNAME_MAX;

/// An interface name Linux accepts (`dev_valid_name`): 1 to 15 bytes, not
/// `.` or `..`, no `/`, `:`, whitespace or NUL.
pub fn check_ifname(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > IFNAME_MAX {
        return Err(format!(
            "interface name {name:?} must be 1 to {IFNAME_MAX} bytes (Linux IFNAMSIZ)"
        ));
    }
    if name == "." || name == ".." {
        return Err(format!("interface name {name:?} is not a name"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| *c == '/' || *c == ':' || c.is_whitespace() || *c == '\0')
    {
        return Err(format!(
            "interface name {name:?} contains {c:?} (Linux refuses '/', ':', whitespace and NUL)"
        ));
    }
    Ok(())
}

/// A network namespace name as `ip netns` keeps it: a file in
/// /run/netns, so a plain file name (1 to 255 bytes, not `.` or `..`, no
/// `/` or NUL) that cannot point outside that directory.
pub fn check_netns(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 255 {
        return Err(format!("netns name {name:?} must be 1 to 255 bytes"));
    }
    if name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(format!(
            "netns name {name:?} must be a plain name (no '/', not . or ..): it is a file in /run/netns"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_names_are_what_linux_takes() {
        for ok in ["eth0", "enp1s0f0", "a", "x-y_z.1", "fifteen-bytes-1"] {
            check_ifname(ok).unwrap();
        }
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/b",
            "eth0:1",
            "a b",
            "sixteen-bytes-12",
            "a\0",
        ] {
            assert!(check_ifname(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn netns_names_are_plain_file_names() {
        for ok in ["lab-r1", "qn-R1", "a.b"] {
            check_netns(ok).unwrap();
        }
        for bad in ["", ".", "..", "../etc", "/run/netns/x", "a/b"] {
            assert!(check_netns(bad).is_err(), "{bad:?} accepted");
        }
        assert!(check_netns(&"n".repeat(256)).is_err());
    }
}
