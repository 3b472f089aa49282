//! A study's id: 80 random bits written as 16 base32 characters, made when a link is
//! made, carried by the link and by every record of its runs.

/// How long a study id is: 16 characters of base32, 80 bits.
pub const STUDY_ID_CHARS: usize = 16;
/// What a study id looks like, for error messages.
pub const STUDY_ID_FORM: &str = "16 characters, lowercase a–z and 2–7";
/// RFC 4648's base32 alphabet, lowercase.
const BASE32: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// A study id from 10 random bytes (the caller draws them from the platform's
/// cryptographic generator): 80 bits in 16 base32 characters, so two links never meet.
pub fn study_id_from_random(random: [u8; 10]) -> String {
    let bits = random
        .iter()
        .fold(0u128, |acc, &byte| (acc << 8) | u128::from(byte));
    (0..STUDY_ID_CHARS)
        .rev()
        .map(|i| char::from(BASE32[((bits >> (5 * i)) & 31) as usize]))
        .collect()
}

/// Whether `id` has a study id's form.
pub fn is_study_id(id: &str) -> bool {
    id.len() == STUDY_ID_CHARS && id.bytes().all(|b| BASE32.contains(&b))
}
