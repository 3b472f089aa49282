//! The share link as a QR code, for beta users who will open it on a phone: drawn as SVG
//! by the `qrcode` crate (ISO/IEC 18004 byte mode, the smallest version that holds the
//! link), or absent with the reason when the link is too long for a code a phone camera
//! reads off a screen.

use qrcode::render::svg;
use qrcode::types::QrError;
use qrcode::{EcLevel, QrCode, Version};

/// The densest code offered: version 25 (117 modules a side) still reads off a laptop
/// screen at arm's length; beyond it a phone needs the code large and steady.
pub const MAX_VERSION: i16 = 25;
/// The longest link [`MAX_VERSION`] holds: 1273 bytes at level L, 997 at M (ISO/IEC
/// 18004, byte mode; the tests check both against the encoder).
pub const MAX_LINK_CHARS: usize = 1273;

/// A link's QR code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkQr {
    /// The code as an SVG document (with its XML declaration, for a file), at least `px`
    /// pixels a side with its quiet zone; it scales by its `viewBox`.
    pub svg: String,
    /// Modules a side, without the quiet zone (21 for version 1, 4 more each version).
    pub modules: usize,
    /// The QR version (1–40).
    pub version: i16,
    /// The error correction level: "M" (15% of the code may be lost) where the link fits,
    /// else "L" (7%).
    pub level: &'static str,
}

/// Why a link has no QR code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkQrError {
    #[error(
        "No QR code: the link is {0} characters, more than a code a phone reads off a screen holds ({MAX_LINK_CHARS}). Shorten the study (fewer targets or scenarios, a shorter request body) or send the link as text."
    )]
    TooLong(usize),
    #[error("the link cannot be drawn as a QR code: {0}")]
    Encoder(String),
}

/// The matrix of `link`'s code: error correction M where the link fits in
/// [`MAX_VERSION`], else L; why, when it fits in neither.
pub fn link_code(link: &str) -> Result<(QrCode, &'static str), LinkQrError> {
    for (level, name) in [(EcLevel::M, "M"), (EcLevel::L, "L")] {
        match QrCode::with_error_correction_level(link.as_bytes(), level) {
            Ok(code) if version_of(&code) <= MAX_VERSION => return Ok((code, name)),
            Ok(_) | Err(QrError::DataTooLong) => continue,
            Err(e) => return Err(LinkQrError::Encoder(e.to_string())),
        }
    }
    Err(LinkQrError::TooLong(link.len()))
}

/// The link's code as SVG, `px` pixels a side at least.
pub fn link_qr(link: &str, px: u32) -> Result<LinkQr, LinkQrError> {
    let (code, level) = link_code(link)?;
    let svg = code
        .render::<svg::Color>()
        .quiet_zone(true)
        .min_dimensions(px, px)
        .dark_color(svg::Color("#000"))
        .light_color(svg::Color("#fff"))
        .build();
    Ok(LinkQr {
        svg,
        modules: code.width(),
        version: version_of(&code),
        level,
    })
}

impl LinkQr {
    /// The SVG element alone, without the XML declaration: for a page's own markup.
    pub fn inline_svg(&self) -> &str {
        self.svg
            .find("<svg")
            .map_or(self.svg.as_str(), |at| &self.svg[at..])
    }
}

fn version_of(code: &QrCode) -> i16 {
    match code.version() {
        Version::Normal(v) | Version::Micro(v) => v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads a code back the way a phone does: from pixels, 4 a module with the quiet zone,
    /// by an independent decoder (rqrr).
    fn read_back(code: &QrCode) -> String {
        let (modules, scale, quiet) = (code.width(), 4, 4);
        let side = (modules + 2 * quiet) * scale;
        let colors = code.to_colors();
        let mut image = rqrr::PreparedImage::prepare_from_greyscale(side, side, |x, y| {
            let (mx, my) = (x / scale, y / scale);
            let inside =
                (quiet..quiet + modules).contains(&mx) && (quiet..quiet + modules).contains(&my);
            if inside && colors[(my - quiet) * modules + (mx - quiet)] == qrcode::Color::Dark {
                0
            } else {
                255
            }
        });
        let grids = image.detect_grids();
        assert_eq!(grids.len(), 1, "one code in the picture");
        grids[0].decode().expect("the code decodes").1
    }

    #[test]
    fn a_share_link_reads_back_from_its_code() {
        let link = format!(
            "https://firsttoken.example.com/run#v1.{}",
            "Ab3_-x".repeat(120)
        );
        let (code, level) = link_code(&link).expect("fits");
        assert_eq!(level, "M");
        assert_eq!(read_back(&code), link);
        let qr = link_qr(&link, 256).expect("fits");
        assert!(
            qr.svg.starts_with("<?xml") && qr.svg.ends_with("</svg>"),
            "{}",
            qr.svg
        );
        assert!(qr.inline_svg().starts_with("<svg ") && qr.inline_svg().contains("viewBox"));
        assert_eq!(qr.modules, 17 + 4 * qr.version as usize);
        assert!(qr.version <= MAX_VERSION);
    }

    #[test]
    fn a_long_link_drops_to_level_l_then_has_no_code() {
        // Version 25 holds 997 bytes at M and 1273 at L.
        let link = |n: usize| format!("https://f.example/run#v1.{}", "a".repeat(n - 25));
        assert_eq!(link_code(&link(997)).expect("fits").1, "M");
        let (code, level) = link_code(&link(998)).expect("fits at L");
        assert_eq!(level, "L");
        assert_eq!(read_back(&code), link(998));
        assert!(link_code(&link(MAX_LINK_CHARS)).is_ok());
        let Err(why) = link_code(&link(MAX_LINK_CHARS + 1)) else {
            panic!("a link too long for version {MAX_VERSION} got a code");
        };
        assert_eq!(why, LinkQrError::TooLong(MAX_LINK_CHARS + 1));
        let why = why.to_string();
        assert!(
            why.contains("1274 characters") && why.contains("send the link as text"),
            "{why}"
        );
    }
}
