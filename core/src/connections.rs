//! Whether a request ran on a new connection, from what the browser and the target said.
//!
//! Two witnesses, neither complete:
//! - Resource Timing. A connect interval means the request opened a connection. Its
//!   absence means reuse only when no CORS preflight went first: a preflight opens any
//!   new connection itself, and Resource Timing then shows the request on it as reused.
//!   And a new origin's first request over HTTP/1.1 always opens a connection: browsers
//!   share HTTP/1.1 connections only within an origin (only HTTP/2 and HTTP/3 coalesce
//!   host names). What Resource Timing proves is never overridden.
//! - The client port the target reports (`X-Firsttoken-Client-Port`, as the demo does): a
//!   connection is the port it came from, so a port already seen for the same target is
//!   an old connection, *whatever host name the request used* (browsers coalesce HTTP/2
//!   connections across host names that share an address and a wildcard certificate).
//!   But only if the port is the browser's. Behind a reverse proxy the app sees the
//!   proxy's upstream socket: a new port per request (no upstream keep-alive), ports from
//!   a shared pool, or `0` (uvicorn's proxy-headers middleware "loses" the port). So the
//!   port is believed only once two back-to-back requests on one host name reported the
//!   same one (a run's two warm-up requests, the check's two main requests), and it is
//!   switched off, with the reason, for the rest of the run as soon as it contradicts
//!   Resource Timing, changes between back-to-back requests, or reads 0.
//!
//! The log keeps the ports seen per target (a target's fresh URLs reach the same server
//! as its main URL; two targets are two servers, whose client ports mean nothing to each
//! other).

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

/// What one request showed about its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
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
    /// The run's first request to this origin (scheme, host name and port).
    pub new_origin: bool,
    /// Resource Timing named the protocol HTTP/1.1 (`nextHopProtocol`).
    pub http1: bool,
    /// Sent alone, straight after the target's previous request, which went to the same
    /// URL and also ran alone: nothing but a server's close can have moved it to another
    /// connection.
    pub back_to_back: bool,
}

/// Whether the target's client port can be believed, per target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PortState {
    /// Not yet seen to stay the same across two back-to-back requests; the port it
    /// reported last, if any.
    Unproven(Option<u16>),
    /// Stayed the same; the port reported last.
    Trusted(u16),
    /// Not the browser's port, for this reason.
    Off(PortOff),
}

/// Why a target's client port was not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PortOff {
    /// It reported port 0: a proxy in front of the app lost the client's port.
    Zero,
    /// Two back-to-back requests on one host name reported different ports with no new
    /// connection shown: each request reached the app on a new upstream connection.
    Changed,
    /// It contradicted Resource Timing: a port not seen before on a request the browser
    /// proved reused, or a port seen before on a new origin's first HTTP/1.1 request. The
    /// ports come from a proxy's shared pool of upstream connections.
    Contradicted,
}

impl PortOff {
    /// The reason, for a person.
    pub fn reason(self) -> &'static str {
        match self {
            PortOff::Zero => {
                "the target reported client port 0: a proxy in front of the app lost the browser's port (uvicorn's proxy headers do this); send the port from the proxy (nginx: add_header X-Firsttoken-Client-Port $remote_port always)"
            }
            PortOff::Changed => {
                "the client port changed between two back-to-back requests on one connection: it is the port of a proxy's upstream connection, not the browser's; send it from the proxy that terminates the browser's connection (nginx: $remote_port)"
            }
            PortOff::Contradicted => {
                "the client port contradicted what Resource Timing proved about a connection: it comes from a proxy's pool of upstream connections, not from the browser; send it from the proxy that terminates the browser's connection (nginx: $remote_port)"
            }
        }
    }
}

/// The connections a run's requests have used.
#[derive(Debug, Default)]
pub struct ConnectionLog {
    ports: HashSet<(u32, u16)>,
    state: HashMap<u32, PortState>,
    /// Whether the latest answer came from the port alone (Resource Timing told nothing).
    last_by_port: bool,
}

impl ConnectionLog {
    /// Whether the request ran on a connection no earlier request of the run had used:
    /// `Some(true)` new, `Some(false)` reused, `None` when it cannot be told. Call it for
    /// every request, in the order they started.
    pub fn new_connection(&mut self, w: Witness) -> Option<bool> {
        let timing = match w.timing_reused {
            // The browser timed a connect for this very request. (A port seen before can
            // come back once its old connection is closed.)
            Some(false) => Some(true),
            Some(true) if !w.preflighted => Some(false),
            _ if w.new_origin && w.http1 => Some(true),
            _ => None,
        };
        let first_use = w
            .port
            .filter(|&p| p != 0)
            .map(|p| self.ports.insert((w.target, p)));
        let state = self
            .state
            .entry(w.target)
            .or_insert(PortState::Unproven(None));
        *state = match (*state, w.port) {
            (PortState::Off(off), _) => PortState::Off(off),
            (_, Some(0)) => PortState::Off(PortOff::Zero),
            (state, None) => state,
            (_, Some(_))
                if matches!((timing, first_use), (Some(false), Some(true)))
                    || (w.new_origin && w.http1 && first_use == Some(false)) =>
            {
                PortState::Off(PortOff::Contradicted)
            }
            (PortState::Unproven(Some(last)) | PortState::Trusted(last), Some(port))
                if w.back_to_back && timing != Some(true) =>
            {
                if port == last {
                    PortState::Trusted(port)
                } else {
                    PortState::Off(PortOff::Changed)
                }
            }
            (PortState::Trusted(_), Some(port)) => PortState::Trusted(port),
            (PortState::Unproven(_), Some(port)) => PortState::Unproven(Some(port)),
        };
        let by_port = match self.state[&w.target] {
            PortState::Trusted(_) => first_use,
            _ => None,
        };
        self.last_by_port = timing.is_none() && by_port.is_some();
        timing.or(by_port)
    }

    /// Whether the latest [`Self::new_connection`] answer rests on the client port alone:
    /// if the port is later switched off for its target, that answer is withdrawn too
    /// (the request's connection then cannot be told).
    pub fn last_by_port(&self) -> bool {
        self.last_by_port
    }

    /// Why the port of `target` is not believed, if it is not: `None` while it is, or
    /// while it has not been proven either way.
    pub fn port_off(&self, target: u32) -> Option<PortOff> {
        match self.state.get(&target) {
            Some(PortState::Off(off)) => Some(*off),
            _ => None,
        }
    }

    /// Whether the port of `target` was seen to stay the same across back-to-back
    /// requests, and so is used.
    pub fn port_trusted(&self, target: u32) -> bool {
        matches!(self.state.get(&target), Some(PortState::Trusted(_)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A preflighted request without Resource Timing detail: only the port can tell.
    fn port(target: u32, port: u16) -> Witness {
        Witness {
            target,
            port: Some(port),
            preflighted: true,
            ..Witness::default()
        }
    }

    fn back_to_back(w: Witness) -> Witness {
        Witness {
            back_to_back: true,
            ..w
        }
    }

    /// The warm-up pair that proves a target's port is the browser's.
    fn proven(log: &mut ConnectionLog, target: u32, p: u16) {
        assert_eq!(log.new_connection(port(target, p)), None, "not proven yet");
        assert_eq!(
            log.new_connection(back_to_back(port(target, p))),
            Some(false)
        );
        assert!(log.port_trusted(target));
    }

    #[test]
    fn a_port_seen_before_is_a_reused_connection_under_any_host_name() {
        let mut log = ConnectionLog::default();
        proven(&mut log, 0, 50_001);
        // "Fresh" requests on new host names.
        assert_eq!(log.new_connection(port(0, 50_002)), Some(true));
        // An HTTP/2 browser coalesced the third fresh host name onto the first
        // connection: a new origin, an old port.
        assert_eq!(log.new_connection(port(0, 50_002)), Some(false));
        // Another target's ports are another server's, and not proven yet.
        assert_eq!(log.new_connection(port(1, 50_001)), None);
    }

    #[test]
    fn a_port_is_not_believed_before_two_back_to_back_requests_agree() {
        let mut log = ConnectionLog::default();
        assert_eq!(log.new_connection(port(0, 50_001)), None);
        assert_eq!(log.new_connection(port(0, 50_002)), None);
        assert_eq!(log.port_off(0), None);
        assert!(!log.port_trusted(0));
    }

    #[test]
    fn a_timed_connect_is_new_even_on_a_port_seen_before() {
        let mut log = ConnectionLog::default();
        proven(&mut log, 0, 50_001);
        let reopened = Witness {
            timing_reused: Some(false),
            ..port(0, 50_001)
        };
        assert_eq!(log.new_connection(reopened), Some(true));
        assert!(log.port_trusted(0));
    }

    #[test]
    fn without_a_port_resource_timing_decides_where_it_can() {
        let mut log = ConnectionLog::default();
        let timing = |reused: Option<bool>, preflighted: bool| Witness {
            timing_reused: reused,
            preflighted,
            ..Witness::default()
        };
        assert_eq!(log.new_connection(timing(Some(false), true)), Some(true));
        assert_eq!(log.new_connection(timing(Some(true), false)), Some(false));
        // The preflight may have opened it: no verdict.
        assert_eq!(log.new_connection(timing(Some(true), true)), None);
        assert_eq!(log.new_connection(timing(None, false)), None);
        // A new origin over HTTP/1.1 cannot share another origin's connection.
        let h1 = Witness {
            new_origin: true,
            http1: true,
            ..timing(Some(true), true)
        };
        assert_eq!(log.new_connection(h1), Some(true));
        // Over HTTP/2 it can (coalescing): no verdict.
        let h2 = Witness { http1: false, ..h1 };
        assert_eq!(log.new_connection(h2), None);
    }

    /// uvicorn behind a proxy that sends `X-Forwarded-For` reports port 0 for every
    /// request: before, the first request read "new" and every later one "reused".
    #[test]
    fn port_zero_is_no_port() {
        let mut log = ConnectionLog::default();
        assert_eq!(log.new_connection(port(0, 0)), None);
        assert_eq!(log.new_connection(back_to_back(port(0, 0))), None);
        assert_eq!(log.new_connection(port(0, 0)), None);
        assert_eq!(log.port_off(0), Some(PortOff::Zero));
        assert!(PortOff::Zero.reason().contains("port 0"));
    }

    /// nginx without upstream keep-alive: every request reaches the app on a new upstream
    /// connection, so every port is new. Before, every steady request read "new", even
    /// where Resource Timing proved reuse.
    #[test]
    fn a_port_that_changes_between_back_to_back_requests_is_switched_off() {
        let mut log = ConnectionLog::default();
        assert_eq!(log.new_connection(port(0, 40_001)), None);
        assert_eq!(log.new_connection(back_to_back(port(0, 40_002))), None);
        assert_eq!(log.port_off(0), Some(PortOff::Changed));
        // Later ports are ignored; Resource Timing still speaks where it can.
        assert_eq!(log.new_connection(back_to_back(port(0, 40_003))), None);
        let same_origin_reuse = Witness {
            timing_reused: Some(true),
            preflighted: false,
            ..port(0, 40_004)
        };
        assert_eq!(log.new_connection(same_origin_reuse), Some(false));
    }

    /// Answers that rest on the port alone say so, so the runner can withdraw them when
    /// the port is switched off later in the run; answers Resource Timing gave do not.
    #[test]
    fn answers_from_the_port_alone_are_marked() {
        let mut log = ConnectionLog::default();
        proven(&mut log, 0, 40_001);
        assert!(log.last_by_port(), "the warm-up pair's second, by its port");
        assert_eq!(log.new_connection(port(0, 40_002)), Some(true));
        assert!(log.last_by_port());
        let timed = Witness {
            timing_reused: Some(true),
            preflighted: false,
            ..port(0, 40_002)
        };
        assert_eq!(log.new_connection(timed), Some(false));
        assert!(!log.last_by_port(), "Resource Timing's");
        assert_eq!(log.new_connection(port(0, 0)), None);
        assert!(!log.last_by_port());
        assert_eq!(log.port_off(0), Some(PortOff::Zero));
    }

    /// A request without a preflight that Resource Timing shows reused is reused, whatever
    /// port the target reports, and a new port there shows the port is not the browser's.
    #[test]
    fn resource_timing_proof_wins_over_a_port() {
        let mut log = ConnectionLog::default();
        proven(&mut log, 0, 40_001);
        let proved_reused = Witness {
            timing_reused: Some(true),
            preflighted: false,
            ..port(0, 40_777)
        };
        assert_eq!(log.new_connection(proved_reused), Some(false));
        assert_eq!(log.port_off(0), Some(PortOff::Contradicted));
        // From then on a new port is not read as a new connection.
        assert_eq!(log.new_connection(port(0, 40_778)), None);
    }

    /// A proxy's shared pool: a new host name over HTTP/1.1 must be a new browser
    /// connection, yet the port is one seen before.
    #[test]
    fn an_old_port_on_a_new_http1_origin_switches_the_port_off() {
        let mut log = ConnectionLog::default();
        proven(&mut log, 0, 40_001);
        let fresh = Witness {
            new_origin: true,
            http1: true,
            timing_reused: Some(true),
            ..port(0, 40_001)
        };
        assert_eq!(log.new_connection(fresh), Some(true));
        assert_eq!(log.port_off(0), Some(PortOff::Contradicted));
    }
}
