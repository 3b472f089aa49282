//! Whether a request ran on a new connection, from what the browser and the target said.
//!
//! Two witnesses, neither complete:
//! - The client port the target reports (`X-Firsttoken-Client-Port`, as the demo does): a
//!   connection is the port it came from, so a port already seen for the same target is
//!   an old connection, *whatever host name the request used*. Browsers coalesce HTTP/2
//!   and HTTP/3 connections across host names that share an IP address and certificate
//!   (a wildcard one), so a fresh host name does not guarantee a fresh connection.
//! - Resource Timing: a connect interval means the request opened a connection. Its
//!   absence means reuse only when no CORS preflight went first: a preflight opens any
//!   new connection itself, and Resource Timing then shows the request on it as reused.
//!
//! The log keeps the ports seen per target (a target's fresh URLs reach the same server
//! as its main URL; two targets are two servers, whose client ports mean nothing to each
//! other).

use std::collections::HashSet;

/// What one request showed about its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Witness {
    /// Which of the run's targets it went to.
    pub target: u32,
    /// The client port the target reported, if it did.
    pub port: Option<u16>,
    /// What Resource Timing showed: `Some(false)` a connect interval, `Some(true)` none,
    /// `None` no entry or no detail (a cross-origin target without `Timing-Allow-Origin`).
    pub timing_reused: Option<bool>,
    /// The request needed a CORS preflight.
    pub preflighted: bool,
}

/// The connections a run's requests have used.
#[derive(Debug, Default)]
pub struct ConnectionLog {
    ports: HashSet<(u32, u16)>,
}

impl ConnectionLog {
    /// Whether the request ran on a connection no earlier request of the run had used:
    /// `Some(true)` new, `Some(false)` reused, `None` when it cannot be told. Call it for
    /// every request, in the order they started.
    pub fn new_connection(&mut self, w: Witness) -> Option<bool> {
        let first_use = w.port.map(|port| self.ports.insert((w.target, port)));
        match (w.timing_reused, first_use) {
            // The browser timed a connect for this very request. (A port seen before can
            // come back once its old connection is closed.)
            (Some(false), _) => Some(true),
            (_, Some(first)) => Some(first),
            (Some(true), None) if !w.preflighted => Some(false),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(target: u32, port: u16) -> Witness {
        Witness {
            target,
            port: Some(port),
            timing_reused: Some(true),
            preflighted: true,
        }
    }

    #[test]
    fn a_port_seen_before_is_a_reused_connection_under_any_host_name() {
        let mut log = ConnectionLog::default();
        // The warm-up on the main host name, then "fresh" requests on new host names.
        assert_eq!(log.new_connection(port(0, 50_001)), Some(true));
        assert_eq!(log.new_connection(port(0, 50_002)), Some(true));
        // An HTTP/2 browser coalesced the third fresh host name onto the first
        // connection: a new origin, an old port.
        assert_eq!(log.new_connection(port(0, 50_001)), Some(false));
        // Another target's ports are another server's.
        assert_eq!(log.new_connection(port(1, 50_001)), Some(true));
    }

    #[test]
    fn a_timed_connect_is_new_even_on_a_port_seen_before() {
        let mut log = ConnectionLog::default();
        assert_eq!(log.new_connection(port(0, 50_001)), Some(true));
        let reopened = Witness {
            timing_reused: Some(false),
            ..port(0, 50_001)
        };
        assert_eq!(log.new_connection(reopened), Some(true));
    }

    #[test]
    fn without_a_port_resource_timing_decides_where_it_can() {
        let mut log = ConnectionLog::default();
        let timing = |reused: Option<bool>, preflighted: bool| Witness {
            target: 0,
            port: None,
            timing_reused: reused,
            preflighted,
        };
        assert_eq!(log.new_connection(timing(Some(false), true)), Some(true));
        assert_eq!(log.new_connection(timing(Some(true), false)), Some(false));
        // The preflight may have opened it: no verdict.
        assert_eq!(log.new_connection(timing(Some(true), true)), None);
        assert_eq!(log.new_connection(timing(None, false)), None);
    }
}
