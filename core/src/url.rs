//! URLs as the contract reads them: the origin of a URL (what CORS, a record's target and
//! the collector's allow-list compare), what makes a string an origin, and a URL's host.

/// The origin of an absolute http(s) URL (`https://chat.example.com:8443`), lowercase.
pub fn origin_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next()?.to_ascii_lowercase();
    let authority = match (scheme.as_str(), authority.rsplit_once(':')) {
        // The default port is not part of the origin as browsers write it.
        ("http", Some((host, "80"))) | ("https", Some((host, "443"))) => host.to_owned(),
        _ => authority,
    };
    let origin = format!("{scheme}://{authority}");
    check_origin(&origin).ok().map(|()| origin)
}

/// What makes a string not an origin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OriginError {
    #[error("must be at most 255 characters")]
    TooLong,
    #[error("must start with http:// or https://")]
    Scheme,
    #[error("has no host")]
    NoHost,
    #[error("must be scheme://host[:port] with no path, query or credentials")]
    NotJustHost,
    #[error("has an invalid port {0:?}")]
    Port(String),
}

/// An origin is `http://` or `https://`, a host, maybe a port, and nothing else.
pub fn check_origin(origin: &str) -> Result<(), OriginError> {
    if origin.len() > 255 {
        return Err(OriginError::TooLong);
    }
    let rest = origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"))
        .ok_or(OriginError::Scheme)?;
    let (host, port) = match rest.rsplit_once(':') {
        // An IPv6 literal keeps its colons inside brackets.
        Some((host, port)) if !port.contains(']') => (host, Some(port)),
        _ => (rest, None),
    };
    if host.is_empty() {
        return Err(OriginError::NoHost);
    }
    let host_ok = if let Some(v6) = host.strip_prefix('[') {
        v6.strip_suffix(']').is_some_and(|inner| {
            !inner.is_empty()
                && inner
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
        })
    } else {
        host.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
    };
    if !host_ok {
        return Err(OriginError::NotJustHost);
    }
    if let Some(port) = port
        && port.parse::<u16>().map_or(true, |p| p == 0)
    {
        return Err(OriginError::Port(port.to_owned()));
    }
    Ok(())
}

/// The `host[:port]` of a URL, without any user name or password.
pub fn host_of(url: &str) -> Option<String> {
    let (_, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}
