//! The target's own certificate authority, made at start, and the leaf it signs for the
//! target's host names (a wildcard among them for the fresh host names).

use std::sync::Arc;

use anyhow::Context as _;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::TlsAcceptor;

use super::{CERTIFICATE_NAMES, TlsVersion};

/// A certificate authority made for one target, and its leaf.
pub(super) struct Authority {
    pub(super) ca_der: Vec<u8>,
    pub(super) ca_spki: Vec<u8>,
    pub(super) leaf_der: Vec<u8>,
    pub(super) leaf_key: Vec<u8>,
}

impl Authority {
    pub(super) fn make() -> anyhow::Result<Self> {
        let ca_key = KeyPair::generate().context("making the authority's key")?;
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        ca.distinguished_name
            .push(DnType::CommonName, "firsttoken field target test authority");
        let ca_cert = ca.self_signed(&ca_key).context("signing the authority")?;

        let leaf_key = KeyPair::generate().context("making the leaf's key")?;
        let mut leaf = CertificateParams::new(
            CERTIFICATE_NAMES
                .iter()
                .map(|name| (*name).to_owned())
                .collect::<Vec<_>>(),
        )?;
        leaf.is_ca = IsCa::ExplicitNoCa;
        leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        leaf.distinguished_name
            .push(DnType::CommonName, "target.test");
        let leaf_cert = leaf
            .signed_by(&leaf_key, &ca_cert, &ca_key)
            .context("signing the leaf")?;
        Ok(Self {
            ca_der: ca_cert.der().to_vec(),
            ca_spki: ca_key.public_key_der(),
            leaf_der: leaf_cert.der().to_vec(),
            leaf_key: leaf_key.serialize_der(),
        })
    }

    /// A TLS acceptor that speaks `version` only and sends the chain [leaf, authority].
    pub(super) fn acceptor(&self, version: TlsVersion, http2: bool) -> anyhow::Result<TlsAcceptor> {
        let version: &'static rustls::SupportedProtocolVersion = match version {
            TlsVersion::Tls12 => &rustls::version::TLS12,
            TlsVersion::Tls13 => &rustls::version::TLS13,
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[version])?
            .with_no_client_auth()
            .with_single_cert(
                vec![
                    CertificateDer::from(self.leaf_der.clone()),
                    CertificateDer::from(self.ca_der.clone()),
                ],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.leaf_key.clone())),
            )?;
        config.alpn_protocols = if http2 {
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        } else {
            vec![b"http/1.1".to_vec()]
        };
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}
