//! Unit tests of the TTL rules, against varnishd's and RFC 9111's.

use super::*;

const D: TtlDefaults = TtlDefaults {
    default_ttl: 120.0,
    default_grace: 10.0,
    default_keep: 0.0,
    varnish_compat: false,
};
const COMPAT: TtlDefaults = TtlDefaults {
    varnish_compat: true,
    ..D
};

fn hdrs(pairs: &[(&'static str, String)]) -> Headers {
    let mut h = Headers::new();
    for (n, v) in pairs {
        h.append(*n, v.clone());
    }
    h
}

#[test]
fn defaults_and_directives() {
    let now = 1_000_000.0;
    assert_eq!(rfc_ttl(200, &Headers::new(), now, &D).ttl, 120.0);
    let h = hdrs(&[("Cache-Control", "public, max-age=60".into())]);
    assert_eq!(rfc_ttl(200, &h, now, &D).ttl, 60.0);
    let h = hdrs(&[("Cache-Control", "max-age=60, s-maxage=30".into())]);
    assert_eq!(rfc_ttl(200, &h, now, &D).ttl, 30.0);
    // A quoted number: the RFC's form in a field for this cache,
    // nothing in plain Cache-Control (as varnishd reads it).
    let h = hdrs(&[("CDN-Cache-Control", "max-age=\"45\"".into())]);
    assert_eq!(rfc_ttl(200, &h, now, &D).ttl, 45.0);
    let h = hdrs(&[("Cache-Control", "max-age=\"45\"".into())]);
    assert_eq!(rfc_ttl(200, &h, now, &D).ttl, 0.0);
    let h = hdrs(&[("Cache-Control", "max-age=abc".into())]);
    assert_eq!(rfc_ttl(200, &h, now, &D).ttl, 0.0);
    let h = hdrs(&[("Cache-Control", "max-age=99999999999999999999".into())]);
    assert!(rfc_ttl(200, &h, now, &D).ttl > 1e9);
}

#[test]
fn status_rules() {
    let now = 1_000_000.0;
    assert_eq!(rfc_ttl(500, &Headers::new(), now, &D).ttl, 0.0);
    assert_eq!(rfc_ttl(302, &Headers::new(), now, &D).ttl, 0.0);
    let h = hdrs(&[("Cache-Control", "max-age=5".into())]);
    assert_eq!(rfc_ttl(302, &h, now, &D).ttl, 5.0);
    assert_eq!(rfc_ttl(404, &Headers::new(), now, &D).ttl, 120.0);
}

#[test]
fn age_and_expires() {
    let now = 1_000_000.0;
    let h = hdrs(&[("Cache-Control", "max-age=60".into()), ("Age", "20".into())]);
    let t = rfc_ttl(200, &h, now, &D);
    assert_eq!(t.t_origin, now - 20.0);
    assert_eq!(t.t_origin + t.ttl - now, 40.0);
    let h = hdrs(&[
        ("Date", lacquer_core::time::http_date(now)),
        ("Expires", lacquer_core::time::http_date(now + 300.0)),
    ]);
    assert_eq!(rfc_ttl(200, &h, now, &D).ttl, 300.0);
    let h = hdrs(&[("Expires", "0".into())]);
    assert_eq!(rfc_ttl(200, &h, now, &D).ttl, 0.0);
    let h = hdrs(&[(
        "Cache-Control",
        "max-age=1, stale-while-revalidate=30".into(),
    )]);
    assert_eq!(rfc_ttl(200, &h, now, &D).grace, 30.0);
}

#[test]
fn an_age_list_is_read_by_its_first_value() {
    let now = 1_000_000.0;
    let h = hdrs(&[
        ("Cache-Control", "max-age=60".into()),
        ("Age", "7200, 0".into()),
    ]);
    for d in [&D, &COMPAT] {
        let t = rfc_ttl(200, &h, now, d);
        assert_eq!(t.t_origin, now - 7200.0);
        assert!(t.t_origin + t.ttl < now, "stale on arrival");
    }
    let h = hdrs(&[
        ("Cache-Control", "max-age=60".into()),
        ("Age", "x, 5".into()),
    ]);
    assert_eq!(rfc_ttl(200, &h, now, &D).t_origin, now);
}

#[test]
fn expires_less_date_less_age_whichever_clock_is_fast() {
    let now = 1_000_000.0;
    // The origin's clock 2 s behind ours, or an hour ahead: the
    // lifetime is Expires - Date = 60 s either way, and an Age of 100 s
    // leaves nothing of it.
    for skew in [-2.0, 3600.0] {
        let date = now + skew;
        let h = hdrs(&[
            ("Date", lacquer_core::time::http_date(date)),
            ("Expires", lacquer_core::time::http_date(date + 60.0)),
            ("Age", "100".into()),
        ]);
        let t = rfc_ttl(200, &h, now, &D);
        assert_eq!(t.ttl, 60.0, "skew {skew}");
        assert!(t.t_origin + t.ttl < now, "stale on arrival (skew {skew})");
        let h = hdrs(&[
            ("Date", lacquer_core::time::http_date(date)),
            ("Expires", lacquer_core::time::http_date(date + 60.0)),
            ("Age", "20".into()),
        ]);
        let t = rfc_ttl(200, &h, now, &D);
        assert_eq!(t.t_origin + t.ttl - now, 40.0, "skew {skew}");
    }
}

#[test]
fn stale_if_error_keeps_the_object_and_opens_a_window() {
    let now = 1_000_000.0;
    let h = hdrs(&[("Cache-Control", "max-age=10, stale-if-error=100".into())]);
    let t = rfc_ttl(200, &h, now, &D);
    assert_eq!(t.keep, 100.0);
    assert!(stale_if_error(&h, &t, now + 109.0));
    assert!(!stale_if_error(&h, &t, now + 111.0));
    let plain = hdrs(&[("Cache-Control", "max-age=10".into())]);
    assert!(!stale_if_error(
        &plain,
        &rfc_ttl(200, &plain, now, &D),
        now + 11.0
    ));
}

#[test]
fn targeted_fields_win_and_silence_expires() {
    let now = 1_000_000.0;
    let h = hdrs(&[
        ("Cache-Control", "max-age=60".into()),
        ("CDN-Cache-Control", "max-age=3600".into()),
    ]);
    assert_eq!(rfc_ttl(200, &h, now, &D).ttl, 3600.0);
    assert_eq!(rfc_ttl(200, &h, now, &COMPAT).ttl, 60.0);
    let h = hdrs(&[
        ("CDN-Cache-Control", "max-age=3600".into()),
        ("Lacquer-Cache-Control", "max-age=5".into()),
    ]);
    assert_eq!(rfc_ttl(200, &h, now, &D).ttl, 5.0);
    let h = hdrs(&[
        ("Cache-Control", "max-age=60".into()),
        ("CDN-Cache-Control", "no-store".into()),
    ]);
    assert_eq!(rfc_ttl(200, &h, now, &D).ttl, 0.0);
    // A targeted field without a lifetime: the default, not Expires.
    let h = hdrs(&[
        ("Expires", lacquer_core::time::http_date(now + 300.0)),
        ("CDN-Cache-Control", "public".into()),
    ]);
    assert_eq!(rfc_ttl(200, &h, now, &D).ttl, 120.0);
    assert_eq!(rfc_ttl(200, &h, now, &COMPAT).ttl, 300.0);
}

#[test]
fn invalid_lifetimes_are_stale_and_ages_robust() {
    let now = 1_000_000.0;
    // Strict where the field is meant for this cache.
    for bad in ["max-age=1.5", "max-age=10s", "max-age=-1", "max-age="] {
        let h = hdrs(&[("CDN-Cache-Control", bad.into())]);
        assert_eq!(rfc_ttl(200, &h, now, &D).ttl, 0.0, "{bad}");
    }
    // Plain Cache-Control as varnishd's strtoul reads it, in both
    // modes (the values varnishd 7.1.1 gives them).
    for (cc, ttl) in [
        ("max-age=1.5", 1.0),
        ("max-age=10s", 0.0),
        ("max-age=-1", 0.0),
        ("max-age=", 0.0),
        ("max-age=abc", 0.0),
        ("max-age=\"45\"", 0.0),
        ("max-age= 30", 30.0),
        ("max-age=+7", 7.0),
        ("max-age=010", 10.0),
        ("max-age=0x10", 0.0),
        ("max-age=09", 9.0),
        ("MAX-AGE=5", 5.0),
        ("max-age=99999999999", 4_294_967_296.0),
        ("max-age=99999999999999999999", 4_294_967_296.0),
    ] {
        let h = hdrs(&[("Cache-Control", cc.into())]);
        assert_eq!(rfc_ttl(200, &h, now, &D).ttl, ttl, "{cc}");
        assert_eq!(rfc_ttl(200, &h, now, &COMPAT).ttl, ttl, "{cc} (compat)");
    }
    // A directive without a value is no lifetime: the default.
    let h = hdrs(&[("Cache-Control", "max-age".into())]);
    assert_eq!(rfc_ttl(200, &h, now, &D).ttl, 120.0);
    let h = hdrs(&[
        ("Cache-Control", "max-age=60".into()),
        ("Age", "abc".into()),
    ]);
    assert_eq!(rfc_ttl(200, &h, now, &D).t_origin, now);
    let h = hdrs(&[("Age", "99999999999999999999".into())]);
    assert_eq!(rfc_ttl(200, &h, now, &D).t_origin, now - 2_147_483_648.0);
}

#[test]
fn revalidation_directives_forbid_stale() {
    let now = 1_000_000.0;
    for cc in [
        "max-age=10, must-revalidate, stale-while-revalidate=30, stale-if-error=60",
        "max-age=10, proxy-revalidate, stale-if-error=60",
        "s-maxage=10, stale-if-error=60",
    ] {
        let h = hdrs(&[("Cache-Control", cc.into())]);
        let t = rfc_ttl(200, &h, now, &D);
        assert_eq!(t.grace, 0.0, "{cc}");
        assert_eq!(t.keep, 0.0, "{cc}");
        assert!(!stale_if_error(&h, &t, now + 11.0), "{cc}");
        assert!(rfc_ttl(200, &h, now, &COMPAT).grace >= 10.0, "{cc}");
    }
}

#[test]
fn only_if_cached_is_read_from_the_request() {
    let h = hdrs(&[("Cache-Control", "max-stale, only-if-cached".into())]);
    assert!(only_if_cached(&h));
    assert!(!only_if_cached(&hdrs(&[(
        "Cache-Control",
        "no-cache".into()
    )])));
}

#[test]
fn heuristic_freshness_from_last_modified() {
    let now = 1_000_000.0;
    let date = lacquer_core::time::http_date;
    // Modified 300 s ago: a tenth of that, under default_ttl.
    let h = hdrs(&[("Date", date(now)), ("Last-Modified", date(now - 300.0))]);
    assert_eq!(rfc_ttl(200, &h, now, &D).ttl, 30.0);
    assert_eq!(rfc_ttl(200, &h, now, &COMPAT).ttl, 120.0);
    // Long unchanged: default_ttl caps it.
    let h = hdrs(&[("Last-Modified", date(now - 86400.0))]);
    assert_eq!(rfc_ttl(200, &h, now, &D).ttl, 120.0);
    // Explicit lifetimes are not heuristics.
    let h = hdrs(&[
        ("Cache-Control", "max-age=600".into()),
        ("Last-Modified", date(now - 300.0)),
    ]);
    assert_eq!(rfc_ttl(200, &h, now, &D).ttl, 600.0);
    // A Last-Modified in the future or unparsable is not used.
    for lm in [date(now + 300.0), "yesterday".into()] {
        let h = hdrs(&[("Last-Modified", lm)]);
        assert_eq!(rfc_ttl(200, &h, now, &D).ttl, 120.0);
    }
}

#[test]
fn rfc_statuses() {
    let now = 1_000_000.0;
    // The RFC's statuses only where a field meant for this cache
    // decides; with plain Cache-Control (or none), varnishd's.
    let targeted = hdrs(&[("CDN-Cache-Control", "max-age=60".into())]);
    let plain = hdrs(&[("Cache-Control", "max-age=60".into())]);
    for status in [308, 405, 501] {
        assert_eq!(rfc_ttl(status, &targeted, now, &D).ttl, 60.0);
        assert_eq!(rfc_ttl(status, &plain, now, &D).ttl, 0.0);
        assert_eq!(rfc_ttl(status, &Headers::new(), now, &D).ttl, 0.0);
        assert_eq!(rfc_ttl(status, &Headers::new(), now, &COMPAT).ttl, 0.0);
    }
    // A partial response is never stored as if complete.
    assert_eq!(rfc_ttl(206, &targeted, now, &D).ttl, 0.0);
    assert_eq!(rfc_ttl(206, &plain, now, &D).ttl, 0.0);
    // Redirects: with an explicit lifetime or public.
    assert_eq!(rfc_ttl(303, &targeted, now, &D).ttl, 60.0);
    assert_eq!(rfc_ttl(303, &plain, now, &D).ttl, 0.0);
    assert_eq!(rfc_ttl(303, &plain, now, &COMPAT).ttl, 0.0);
    assert_eq!(rfc_ttl(307, &plain, now, &D).ttl, 60.0);
    let public = hdrs(&[("CDN-Cache-Control", "public".into())]);
    assert_eq!(rfc_ttl(307, &public, now, &D).ttl, 120.0);
    let public = hdrs(&[("Cache-Control", "public".into())]);
    assert_eq!(rfc_ttl(307, &public, now, &D).ttl, 0.0);
    assert_eq!(rfc_ttl(307, &Headers::new(), now, &D).ttl, 0.0);
    // Errors are not stored, whatever a blanket header says.
    assert_eq!(rfc_ttl(500, &targeted, now, &D).ttl, 0.0);
    assert_eq!(rfc_ttl(403, &targeted, now, &D).ttl, 0.0);
}

/// Plain Cache-Control (and Expires, and nothing) never gives a
/// longer life than varnishd's rules do, for any status.
#[test]
fn without_a_targeted_field_nothing_lives_longer_than_in_varnishd() {
    let now = 1_000_000.0;
    let date = lacquer_core::time::http_date;
    let cases: Vec<Vec<(&'static str, String)>> = vec![
        vec![],
        vec![("Cache-Control", "max-age=60".into())],
        vec![("Cache-Control", "public".into())],
        vec![("Cache-Control", "s-maxage=30, max-age=600".into())],
        vec![("Cache-Control", "max-age=1.5".into())],
        vec![("Cache-Control", "max-age=\"900\"".into())],
        vec![("Cache-Control", "max-age=010".into())],
        vec![("Cache-Control", "no-cache, max-age=5".into())],
        vec![("Expires", date(now + 300.0))],
        vec![
            ("Expires", date(now + 300.0)),
            ("Last-Modified", date(now - 100.0)),
        ],
        vec![("Cache-Control", "max-age=60".into()), ("Age", "20".into())],
    ];
    for status in [
        200, 203, 204, 206, 300, 301, 302, 303, 304, 307, 308, 404, 405, 410, 414, 500, 501, 503,
    ] {
        for case in &cases {
            let h = hdrs(case);
            let (ours, varnishd) = (
                rfc_ttl(status, &h, now, &D),
                rfc_ttl(status, &h, now, &COMPAT),
            );
            assert!(
                ours.t_origin + ours.ttl <= varnishd.t_origin + varnishd.ttl,
                "{status} {case:?}: {ours:?} against {varnishd:?}"
            );
        }
    }
}

#[test]
fn the_logged_max_age_is_the_deciding_fields() {
    let h = hdrs(&[
        ("Cache-Control", "max-age=60".into()),
        ("CDN-Cache-Control", "s-maxage=600".into()),
    ]);
    assert_eq!(logged_max_age(&h, false), 600.0);
    assert_eq!(logged_max_age(&h, true), 60.0);
    assert_eq!(logged_max_age(&Headers::new(), false), 0.0);
}

#[test]
fn request_directives() {
    let wants = |cc: &str| request_wants(&hdrs(&[("Cache-Control", cc.into())]));
    assert_eq!(request_wants(&Headers::new()), RequestWants::default());
    assert_eq!(wants("max-stale").max_stale, Some(f64::INFINITY));
    assert_eq!(wants("max-stale=30").max_stale, Some(30.0));
    assert_eq!(wants("max-stale=3x").max_stale, None);
    assert_eq!(wants("min-fresh=20").min_fresh, 20.0);
    assert_eq!(wants("min-fresh=-5, max-age=0").min_fresh, 0.0);
    assert_eq!(wants("no-cache, max-age=0"), RequestWants::default());
}

#[test]
fn stale_forbidden_by_the_deciding_field() {
    let h = hdrs(&[("Cache-Control", "max-age=60, must-revalidate".into())]);
    assert!(forbids_stale(&h));
    let h = hdrs(&[
        ("Cache-Control", "max-age=60, must-revalidate".into()),
        ("CDN-Cache-Control", "max-age=600".into()),
    ]);
    assert!(!forbids_stale(&h));
}

#[test]
fn qualified_directives_name_withheld_fields() {
    let h = hdrs(&[(
        "Cache-Control",
        "max-age=60, private=\"Set-Cookie, X-User\", no-cache=\"x-user,X-Id\"".into(),
    )]);
    assert_eq!(withheld_fields(&h, false), ["set-cookie", "x-user", "x-id"]);
    assert!(withheld_fields(&h, true).is_empty());
    // The quoted list is one directive: max-age after it still reads.
    assert_eq!(rfc_ttl(200, &h, 1000.0, &D).ttl, 60.0);
    let h = hdrs(&[("Cache-Control", "no-cache=\"a,b\", max-age=7".into())]);
    assert_eq!(rfc_ttl(200, &h, 1000.0, &D).ttl, 7.0);
    // Unqualified ones name nothing; a targeted field decides.
    let h = hdrs(&[
        ("Cache-Control", "private=\"Set-Cookie\"".into()),
        ("CDN-Cache-Control", "max-age=60, no-cache".into()),
    ]);
    assert!(withheld_fields(&h, false).is_empty());
}
