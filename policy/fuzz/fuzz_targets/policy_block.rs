//! Any agent.md: the parser answers without panicking; a block it accepts
//! renders to text that parses back to the same block.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sysward_policy::parse_agent_md;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    for text in [s.to_string(), format!("```policy\n{s}\n```\n")] {
        if let Ok(p) = parse_agent_md(&text) {
            let rendered = p.block.render();
            let again = parse_agent_md(&format!("```policy\n{rendered}```\n"));
            let mut a = p.block.clone();
            for r in &mut a.rules {
                r.line = 0;
            }
            match again {
                Ok(b) => {
                    let mut b = b.block;
                    for r in &mut b.rules {
                        r.line = 0;
                    }
                    assert_eq!(a, b, "render did not round-trip:\n{rendered}");
                }
                Err(e) => panic!("rendered policy does not parse: {e}\n{rendered}"),
            }
        }
    }
});
