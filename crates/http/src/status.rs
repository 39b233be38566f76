//! A response status as VCL sets it. Varnish lets VCL use codes above 999
//! (`synth(1404)`, `set resp.status = 1200`) to tell its own answers from
//! a backend's: VCL reads back the code it set, and what is sent and
//! stored is the last three digits (`1404` goes out as `404`). The two
//! readings are two methods here, so that no caller writes `% 1000`.

use crate::reason_phrase;

/// A status code as VCL set it, Varnish's 1xxx codes kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Status(u16);

impl Status {
    pub const OK: Status = Status(200);
    pub const SERVICE_UNAVAILABLE: Status = Status(503);

    pub const fn new(code: u16) -> Status {
        Status(code)
    }

    /// The code as VCL reads it (`resp.status`, `beresp.status`): what
    /// was set, a 1xxx code whole.
    pub const fn vcl(self) -> u16 {
        self.0
    }

    /// The code as it is sent and stored: its last three digits.
    pub const fn wire(self) -> u16 {
        self.0 % 1000
    }

    /// The standard reason phrase of the code sent.
    pub fn reason(self) -> &'static str {
        reason_phrase(self.wire())
    }

    /// A code VCL may set: from 100 to 65535, and one whose code sent is
    /// at least 100 (varnishd refuses the rest: `1099` would go out as
    /// `99`).
    pub fn settable(code: i64) -> Option<Status> {
        let code = u16::try_from(code).ok()?;
        (code >= 100 && code % 1000 >= 100).then_some(Status(code))
    }
}

impl From<u16> for Status {
    fn from(code: u16) -> Status {
        Status(code)
    }
}

impl std::fmt::Display for Status {
    /// The code as VCL reads it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_varnish_code_is_read_whole_and_sent_as_its_last_three_digits() {
        let s = Status::new(1404);
        assert_eq!(s.vcl(), 1404);
        assert_eq!(s.wire(), 404);
        assert_eq!(s.reason(), "Not Found");
        assert_eq!(s.to_string(), "1404");
        assert_eq!(Status::new(200).wire(), 200);
    }

    #[test]
    fn only_codes_that_send_a_status_may_be_set() {
        assert_eq!(Status::settable(200), Some(Status::OK));
        assert_eq!(Status::settable(1200).map(Status::wire), Some(200));
        assert_eq!(Status::settable(65535).map(Status::wire), Some(535));
        for bad in [-1, 0, 99, 1000, 1099, 65536, 2_000_000] {
            assert_eq!(Status::settable(bad), None, "{bad}");
        }
    }
}
