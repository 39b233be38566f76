//! The ESI parser over any body, with every option: never a panic, and
//! the program's pieces lie inside the body.
#![no_main]
#![forbid(unsafe_code)]
use lacquer_filters::esi::{parse, Options};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, body)) = data.split_first() else {
        return;
    };
    let opts = Options {
        disable_xml_check: flags & 1 != 0,
        remove_bom: flags & 2 != 0,
        include_onerror: flags & 4 != 0,
        ignore_https: flags & 8 != 0,
        ignore_other_elements: flags & 16 != 0,
    };
    let _ = parse(body, b"/base/page.html", &opts);
});
