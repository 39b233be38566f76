//! Unit tests of the `serve` command line.

use super::*;

fn args(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

fn parse(s: &str) -> Result<ServeConfig, String> {
    match parse_args(&args(s))? {
        ServeAction::Run(c) => Ok(*c),
        _ => Err("not a run".into()),
    }
}

#[test]
fn full_command_line() {
    let c = parse("-a 127.0.0.1:6081 -b 127.0.0.1:8080 -s malloc,256m -t 60 -p default_grace=30 -i edge1 -F -n /tmp/x")
        .unwrap();
    assert_eq!(c.listens[0].name, "a0");
    assert_eq!(
        c.listens[0].addrs,
        ListenAddrs::Tcp(vec!["127.0.0.1:6081".parse().unwrap()])
    );
    assert!(
        matches!(&c.vcl, Some(crate::VclSource::Backend { host, port: 8080 }) if host == "127.0.0.1")
    );
    assert_eq!(c.stores[0].budget, 256 << 20);
    assert_eq!(c.params.default_ttl(), 60.0);
    assert_eq!(c.params.default_grace(), 30.0);
    assert_eq!(c.identity, "edge1");
    assert_eq!(c.workdir, PathBuf::from("/tmp/x"));
}

#[test]
fn errors_are_one_clear_line() {
    for bad in [
        "-b 127.0.0.1:8080 -s malloc,12q",
        "-b 127.0.0.1:8080 -a nonsense",
        "-b 127.0.0.1:8080 -p nosuch=1",
        "-b 127.0.0.1:8080 -Z",
        "-b 127.0.0.1:8080 -s file,/tmp/x,1g,3x",
        "-b 127.0.0.1:8080 -f x.vcl",
        "-b 127.0.0.1:8080 -T :99999",
        "-a :6081",
        "-b",
    ] {
        let err = parse(bad).err().unwrap_or_else(|| panic!("{bad} accepted"));
        assert!(!err.contains('\n'), "{err}");
    }
    assert!(parse("-b 127.0.0.1:8080 -s malloc,12q")
        .err()
        .unwrap()
        .contains("12q"));
    assert!(parse("-b 127.0.0.1:8080 -p nosuch=1")
        .err()
        .unwrap()
        .contains("nosuch"));
}

#[test]
fn varnishd_options_of_packaged_command_lines() {
    let c = parse(
        "-b 127.0.0.1:1 -j unix,user=varnish,workuser=vcache,ccgroup=varnish -l 80m \
         -h critbit -W epoll -I /etc/start.cli -M 127.0.0.1:6083 -r cc_command,vcc_allow_inline_c",
    )
    .unwrap();
    assert_eq!(
        c.jail,
        Jail::Unix {
            user: Some("vcache".into())
        }
    );
    assert_eq!(c.params.vsl_space(), 80 << 20);
    assert_eq!(c.cli_file, Some(PathBuf::from("/etc/start.cli")));
    assert_eq!(c.reverse_cli.as_deref(), Some("127.0.0.1:6083"));
    assert_eq!(c.read_only, vec!["cc_command", "vcc_allow_inline_c"]);
    assert_eq!(parse_jail("unix").unwrap(), Jail::Unix { user: None });
    assert_eq!(parse_jail("none").unwrap(), Jail::None);
    assert_eq!(parse("-b 127.0.0.1:1").unwrap().jail, Jail::Default);
    // Varnish 2's -w maps to the thread pool parameters.
    let c = parse("-b 127.0.0.1:1 -w 50,1000,120").unwrap();
    assert_eq!(c.params.show("thread_pool_min").unwrap(), "50");
    assert_eq!(c.params.show("thread_pool_timeout").unwrap(), "120.000");
    for (bad, says) in [
        ("-u varnish", "-j unix,user=varnish"),
        ("-g varnish", "-j unix,ccgroup=varnish"),
        ("-j jail", "unix or none"),
        ("-j unix,uid=3", "uid=3"),
        ("-h tree", "critbit"),
        ("-W kqueue", "epoll"),
        ("-r nosuch", "nosuch"),
        ("-M 127.0.0.1", "address:port"),
        ("-E /usr/lib/vmod.so", "built in"),
        ("-x nonsense", "optstring"),
    ] {
        let err = parse(&format!("-b 127.0.0.1:1 {bad}")).err().unwrap();
        assert!(err.contains(says), "{bad}: {err}");
    }
    assert!(matches!(
        parse_args(&args("-x vsl")),
        Ok(ServeAction::Describe(Describe::LogTags))
    ));
    let opts = optstring();
    assert!(opts.starts_with("a:b:f:C"), "{opts}");
    assert!(opts.contains("j:") && opts.contains('F') && !opts.contains("F:"));
}

#[test]
fn storage_forms() {
    let c = parse("-b 127.0.0.1:1 -s mem=malloc,1g -s Transient=malloc,64m").unwrap();
    assert_eq!(
        c.stores,
        vec![StoreSpec {
            name: "mem".into(),
            budget: 1 << 30,
            kind: StoreKind::Malloc,
        }]
    );
    assert_eq!(c.transient_budget, Some(64 << 20));
    let c = parse("-b 127.0.0.1:1").unwrap();
    assert_eq!(c.stores[0].budget, DEFAULT_STORE_SIZE);
    assert!(matches!(
        parse_args(&args("-x parameter")),
        Ok(ServeAction::Describe(Describe::Parameters))
    ));
    assert!(matches!(parse_args(&args("-V")), Ok(ServeAction::Version)));
}

#[test]
fn management_flags() {
    let c = parse("-b 127.0.0.1:1").unwrap();
    assert!(c.mgmt_listen.unwrap().iter().all(|a| a.port() == 0));
    assert_eq!(c.secret, SecretSpec::Generate);
    let c = parse("-b 127.0.0.1:1 -T 127.0.0.1:6082 -S /etc/lacquer/secret").unwrap();
    assert_eq!(
        c.mgmt_listen.unwrap(),
        vec!["127.0.0.1:6082".parse().unwrap()]
    );
    assert_eq!(c.secret, SecretSpec::File("/etc/lacquer/secret".into()));
    let c = parse("-b 127.0.0.1:1 -T none -S none").unwrap();
    assert!(c.mgmt_listen.is_none());
    assert_eq!(c.secret, SecretSpec::Disabled);
}

#[test]
fn vcl_file_and_compile_only() {
    let c = parse("-f /etc/lacquer/default.vcl").unwrap();
    assert!(
        matches!(&c.vcl, Some(crate::VclSource::File(p)) if p == &PathBuf::from("/etc/lacquer/default.vcl"))
    );
    assert!(matches!(
        parse_args(&args("-C -f x.vcl")),
        Ok(ServeAction::Compile(_))
    ));
}

#[test]
fn dashboard_listener_is_loopback_unless_told_and_its_secret_needs_it() {
    let c = parse("-b 127.0.0.1:1 --dashboard :6085").unwrap();
    assert_eq!(c.dashboard_listen, vec!["127.0.0.1:6085".parse().unwrap()]);
    assert!(c.dashboard_secret.is_none());
    let c = parse("-b 127.0.0.1:1 --dashboard 0.0.0.0:6085 --dashboard-secret /s").unwrap();
    assert_eq!(c.dashboard_listen, vec!["0.0.0.0:6085".parse().unwrap()]);
    assert_eq!(c.dashboard_secret, Some(PathBuf::from("/s")));
    let e = parse("-b 127.0.0.1:1 --dashboard-secret /s").err().unwrap();
    assert!(e.contains("needs --dashboard"), "{e}");
}

#[test]
fn metrics_listener() {
    let c = parse("-b 127.0.0.1:1 --metrics 127.0.0.1:9131").unwrap();
    assert_eq!(c.metrics_listen, vec!["127.0.0.1:9131".parse().unwrap()]);
    let c = parse("-b 127.0.0.1:1 --metrics=127.0.0.1:0").unwrap();
    assert_eq!(c.metrics_listen.len(), 1);
    assert!(parse("-b 127.0.0.1:1").unwrap().metrics_listen.is_empty());
    let e = parse("-b 127.0.0.1:1 --metrics 127.0.0.1").err().unwrap();
    assert!(e.contains("a port is needed"), "{e}");
    assert!(parse("-b 127.0.0.1:1 --metrics").is_err());
    assert!(parse("-b 127.0.0.1:1 --nosuch 1").is_err());
}

#[test]
fn every_option_has_one_letter_and_a_usage_line() {
    for (i, o) in SERVE_OPTIONS.iter().enumerate() {
        assert!(
            SERVE_OPTIONS[i + 1..].iter().all(|p| p.0 != o.0),
            "-{} twice",
            o.0
        );
        assert!(serve_usage().contains(o.3), "{} in the usage", o.3);
    }
    assert_eq!(
        parse("-Z x").err().as_deref(),
        Some("unknown option \"-Z\"")
    );
}

#[test]
fn file_and_persistent_storage_forms() {
    let s = parse_storage("f=file,/var/cache/l.bin,2g,8k,normal", 0).unwrap();
    assert_eq!(s.name, "f");
    assert_eq!(s.budget, 2 << 30);
    let StoreKind::File(f) = s.kind else {
        panic!("a file store")
    };
    assert_eq!(f.path, PathBuf::from("/var/cache/l.bin"));
    assert_eq!(
        (f.size, f.granularity, f.random),
        (Some(2 << 30), 8192, false)
    );
    let s = parse_storage("file,/tmp,10m", 1).unwrap();
    assert_eq!(s.name, "s1");
    assert!(matches!(s.kind, StoreKind::File(ref f) if f.granularity == 4096 && f.random));
    for kind in ["persistent", "deprecated_persistent"] {
        let s = parse_storage(&format!("p={kind},/var/l.per,1g"), 0).unwrap();
        assert_eq!(
            s.kind,
            StoreKind::Persistent(lacquer_cache::persist::PersistSpec {
                path: PathBuf::from("/var/l.per"),
                size: 1 << 30
            })
        );
    }
    for (bad, says) in [
        ("file", "needs a path"),
        ("file,/nonexistent/x", "give a size"),
        ("file,/tmp/x,10m,0", "invalid granularity"),
        ("file,/tmp/x,10m,4k,sideways", "advice must be"),
        ("file,/tmp/x,50%", "percent"),
        ("file,/tmp/x,10m,4k,random,extra", "too many"),
        ("persistent,/tmp/x", "needs a size"),
        ("malloc,1g,2", "too many"),
        ("umem", "Solaris"),
    ] {
        let err = parse_storage(bad, 0).unwrap_err();
        assert!(err.contains(says), "{bad}: {err}");
    }
    let err = parse("-b 127.0.0.1:1 -s Transient=file,/tmp,10m").err();
    assert!(err.unwrap().contains("Transient must be malloc"));
}

#[test]
fn root_becomes_the_package_user_unless_told_to_stay() {
    let both = |u: &str| u == "lacquer" || u == "varnish";
    let varnish_only = |u: &str| u == "varnish";
    let nobody = |_: &str| false;
    let unix = Jail::Unix { user: None };
    // Root, no -j: the package's user, else Varnish's.
    assert_eq!(
        Jail::Default.user_to_become(0, both).unwrap().as_deref(),
        Some("lacquer")
    );
    assert_eq!(
        Jail::Default
            .user_to_become(0, varnish_only)
            .unwrap()
            .as_deref(),
        Some("varnish")
    );
    assert_eq!(
        unix.user_to_become(0, varnish_only).unwrap().as_deref(),
        Some("varnish")
    );
    // Root with neither: refused, saying how to go on.
    let refused = Jail::Default.user_to_become(0, nobody).unwrap_err();
    assert!(
        refused.contains("-j none") && refused.contains("lacquer"),
        "{refused}"
    );
    // Only an explicit -j none keeps root.
    assert_eq!(Jail::None.user_to_become(0, nobody).unwrap(), None);
    // A named user is taken as given (entering the jail checks it).
    let named = Jail::Unix {
        user: Some("www".into()),
    };
    assert_eq!(
        named.user_to_become(0, nobody).unwrap().as_deref(),
        Some("www")
    );
    // Not root: nothing to give up.
    assert_eq!(Jail::Default.user_to_become(1000, both).unwrap(), None);
    assert_eq!(unix.user_to_become(1000, both).unwrap(), None);
}
