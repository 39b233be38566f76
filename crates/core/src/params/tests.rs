//! The parameter table against varnishd 7.1's: names, defaults, bounds
//! and the forms values are read in.

use super::*;

#[test]
fn defaults_match_varnish() {
    let p = Params::default();
    assert_eq!(p.default_ttl(), 120.0);
    assert_eq!(p.default_grace(), 10.0);
    assert_eq!(p.send_timeout(), 600.0);
    assert_eq!(p.connect_timeout(), 3.5);
    assert_eq!(p.http_req_hdr_len(), 8192);
    assert_eq!(p.http_req_size(), 32768);
    assert_eq!(p.http_max_hdr(), 64);
    assert_eq!(p.nuke_limit(), 50);
    assert!(p.http_range_support());
    assert_eq!(p.max_restarts(), 4);
}

#[test]
fn a_packaged_varnishd_command_line_is_accepted() {
    let p = Params::default();
    for pair in [
        "thread_pool_max=10",
        "thread_pool_add_delay=2",
        "workspace_client=128k",
        "workspace_backend=128k",
        "rush_exponent=3",
        "tcp_keepalive_time=600",
        "pcre2_match_limit=10000",
        "vcl_cooldown=60",
    ] {
        p.set_pair(pair).unwrap_or_else(|e| panic!("{pair}: {e}"));
    }
    assert_eq!(p.workspace_client(), 128 << 10);
    // Text parameters: checked by their own rule, shown as given.
    p.set("vsl_mask", "+Hash,-Debug").unwrap();
    assert_eq!(&*p.vsl_mask(), "+Hash,-Debug");
    assert_eq!(p.show("vsl_mask").as_deref(), Some("+Hash,-Debug"));
    p.set("debug", "+syncvsl").unwrap();
    assert!(!p.debug_req_state());
    p.set("debug", "+syncvsl,+req_state").unwrap();
    assert!(p.debug_req_state());
    p.set("debug", "req_state,-req_state").unwrap();
    assert!(!p.debug_req_state());
    p.set("debug", "+req_state,none").unwrap();
    assert!(!p.debug_req_state());
    p.set("debug", "+syncvsl").unwrap();
    p.set("pool_req", "10,100,10").unwrap();
    p.set("cc_command", "exec cc %s").unwrap();
    assert!(p.set("pool_req", "ten").is_err());
    assert!(p.set("vsl_mask", "+Ha sh").is_err());
    assert!(p.set("acceptor_sleep_decay", "2").is_err());
    let (i, _) = Params::lookup("debug").unwrap();
    assert!(!p.is_default(i));
    p.reset("debug").unwrap();
    assert!(p.is_default(i));
    assert!(
        p.set("pcre2_match_limit", "0").is_err(),
        "Varnish's minimum"
    );
    assert!(
        p.set("workspace_thread", "16k").is_err(),
        "Varnish's maximum"
    );
    // Every parameter says what it does, or why it does nothing here.
    assert!(PARAMS.iter().all(|p| !p.doc.is_empty()));
    assert!(PARAMS.windows(2).all(|w| w[0].name < w[1].name), "sorted");
}

#[test]
fn set_checks_names_values_and_bounds() {
    let p = Params::default();
    p.set("default_ttl", "1h").unwrap();
    assert_eq!(p.default_ttl(), 3600.0);
    p.set_pair("http_req_size=64k").unwrap();
    assert_eq!(p.http_req_size(), 65536);
    assert!(matches!(p.set("nosuch", "1"), Err(ParamError::Unknown(_))));
    assert!(p.set("http_max_hdr", "10").is_err());
    assert!(p.set("http_max_hdr", "70000").is_err());
    assert!(p.set("default_ttl", "-5").is_err());
    assert!(p.set("http_range_support", "perhaps").is_err());
    assert!(p.set_pair("default_ttl").is_err());
    assert_eq!(p.show("http_range_support").unwrap(), "on");
    let (ttl, _) = Params::lookup("default_ttl").unwrap();
    assert!(!p.is_default(ttl));
    p.reset("default_ttl").unwrap();
    assert!(p.is_default(ttl));
    assert_eq!(p.show_index(ttl), "120.000");
    assert!(p.reset("nosuch").is_err());
}

#[test]
fn features_are_flags_set_relative_to_the_current_value() {
    let p = Params::default();
    assert!(p.has(Feature::validate_headers));
    assert!(!p.has(Feature::esi_disable_xml_check));
    p.set("feature", "+esi_disable_xml_check").unwrap();
    assert!(p.has(Feature::esi_disable_xml_check));
    assert!(p.has(Feature::validate_headers));
    assert_eq!(
        p.show("feature").unwrap(),
        "+http2,+esi_disable_xml_check,+validate_headers"
    );
    p.set("feature", "-validate_headers,+esi_remove_bom")
        .unwrap();
    assert!(!p.has(Feature::validate_headers));
    assert!(p.has(Feature::esi_remove_bom));
    assert!(p.set("feature", "+nosuch").is_err());
    p.set("feature", "none").unwrap();
    assert_eq!(p.show("feature").unwrap(), "none");
    p.set("feature", "default").unwrap();
    // HTTP/2 is on by default (varnishd's default has it off).
    assert_eq!(p.show("feature").unwrap(), "+http2,+validate_headers");
    assert_eq!(FEATURES.len(), Feature::busy_stats_rate as usize + 1);
    assert_eq!(
        FEATURES[Feature::esi_include_onerror as usize].0,
        "esi_include_onerror"
    );
}

#[test]
fn every_parameter_is_described() {
    let text = describe_all();
    for spec in PARAMS {
        assert!(text.contains(spec.name));
        assert!(spec.kind.parse(spec.default).is_ok(), "{}", spec.name);
    }
}
