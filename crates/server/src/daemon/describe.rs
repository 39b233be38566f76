//! The tables `-x counters` and `-x vcl` print (Lacquer's additions to
//! varnishd's `-x`): every counter with its kind, unit and meaning, and
//! every VCL variable with its type and the subroutines that may read,
//! set and unset it, from the same tables the daemon and the compiler
//! use. The Debian package makes man pages of them.

use lacquer_core::counters::{CounterSpec, MAIN, MEMPOOL, MGT, SMA, SMF, SMP, VBE};
use lacquer_vcl::types::scope;
use lacquer_vcl::vars::{Versions, HEADER_FAMILIES, VARS};

fn counter_section(out: &mut String, prefix: &str, table: &[CounterSpec]) {
    for c in table {
        let name = format!("{prefix}.{}", c.name);
        out.push_str(&format!(
            "{name}\n{}\n\t{} ({}): {}\n\n",
            "~".repeat(name.len()),
            c.kind.name(),
            c.unit.name(),
            c.doc
        ));
    }
}

/// `-x counters`.
pub fn counters() -> String {
    let mut out = String::new();
    counter_section(&mut out, "MAIN", MAIN);
    counter_section(&mut out, "MGT", MGT);
    counter_section(&mut out, "MEMPOOL.<pool>", MEMPOOL);
    counter_section(&mut out, "SMA.<store>", SMA);
    counter_section(&mut out, "SMF.<store>", SMF);
    counter_section(&mut out, "SMP.<store>", SMP);
    counter_section(&mut out, "VBE.<vcl>.<backend>", VBE);
    out
}

fn where_(out: &mut String, what: &str, mask: u16) {
    if mask != 0 {
        out.push_str(&format!("\t{what}: {}\n", scope::names(mask)));
    }
}

/// `-x vcl`.
pub fn vcl_variables() -> String {
    let mut out = String::new();
    for v in VARS {
        out.push_str(&format!(
            "{}\n{}\n\tType: {}\n",
            v.name,
            "~".repeat(v.name.len()),
            v.ty.name()
        ));
        where_(&mut out, "Readable from", v.read);
        where_(&mut out, "Writable from", v.write);
        where_(&mut out, "Unsetable from", v.unset);
        match v.versions {
            Versions::All => {}
            Versions::V40 => out.push_str("\tOnly in VCL 4.0.\n"),
            Versions::V41 => out.push_str("\tOnly in VCL 4.1.\n"),
            Versions::WritableIn40 => out.push_str("\tWritable only in VCL 4.0.\n"),
        }
        out.push('\n');
    }
    for f in HEADER_FAMILIES {
        let name = format!("{}<name>", f.prefix);
        out.push_str(&format!(
            "{name}\n{}\n\tType: HEADER\n",
            "~".repeat(name.len())
        ));
        where_(&mut out, "Readable from", f.read);
        where_(&mut out, "Writable and unsetable from", f.write);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_counter_and_variable_is_described() {
        let c = counters();
        assert!(
            c.contains("MAIN.cache_hit\n~~~~~~~~~~~~~~\n\tcounter"),
            "{c}"
        );
        assert!(c.contains("VBE.<vcl>.<backend>.req\n"));
        let v = vcl_variables();
        assert!(
            v.contains("req.url\n~~~~~~~\n\tType: STRING\n\tReadable from: vcl_recv"),
            "{v}"
        );
        assert!(v.contains("req.http.<name>\n"));
        assert_eq!(
            v.matches("\tType: ").count(),
            VARS.len() + HEADER_FAMILIES.len()
        );
    }
}
