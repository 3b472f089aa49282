//! The readable JSON of the page's "Download JSON": serde_json's pretty layout (two-space
//! indent, `": "` after a key, `[]` and `{}` when empty), made from the compact JSON the
//! page already writes to upload a run.
//!
//! Why not `serde_json::to_string_pretty(&run)`: serde compiles the record's whole
//! serializer once per output format, so the beta user's page carried a second copy of it
//! (about 9 KB of wasm before optimisation) for one button. This walk over the text is
//! one small function; the tests hold its output to serde_json's, byte for byte.

/// `compact` (JSON as `serde_json::to_string` writes it: no space outside strings) laid out
/// as `serde_json::to_string_pretty` would lay out the same value.
pub fn pretty_json(compact: &str) -> String {
    let mut out = String::with_capacity(compact.len() * 2);
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut chars = compact.chars().peekable();
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        for _ in 0..depth {
            out.push_str("  ");
        }
    };
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                out.push(c);
                let close = if c == '{' { '}' } else { ']' };
                if chars.peek() == Some(&close) {
                    out.push(close);
                    chars.next();
                } else {
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(',');
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::pretty_json;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    /// The reference: serde_json's own pretty writer, on the same value.
    fn same_as_serde(value: &Value) {
        let compact = serde_json::to_string(value).expect("serializes");
        let expected = serde_json::to_string_pretty(value).expect("serializes");
        assert_eq!(pretty_json(&compact), expected, "from {compact}");
    }

    #[test]
    fn a_run_record_is_laid_out_as_serde_json_lays_it_out() {
        let run: firsttoken_core::schema::Run =
            serde_json::from_str(include_str!("../../core/schema/example-run.v1.json"))
                .expect("the example run");
        let compact = serde_json::to_string(&run).expect("serializes");
        let expected = serde_json::to_string_pretty(&run).expect("serializes");
        assert!(expected.lines().count() > 100, "a run of some size");
        assert_eq!(pretty_json(&compact), expected);
    }

    #[test]
    fn empty_containers_strings_with_syntax_and_escapes() {
        same_as_serde(&json!({}));
        same_as_serde(&json!([]));
        same_as_serde(&json!({"a": [], "b": {}, "c": [[], [{}]], "d": null}));
        same_as_serde(&json!({"text": "a, b: {c} [d] \"e\" \\ f\n\t\u{1}", "n": -1.5e-7}));
        same_as_serde(&json!(["\\", "\\\"", "]", "}", ",", ":", "ü ✓ 🦀"]));
        same_as_serde(&json!(42));
        same_as_serde(&json!("alone"));
    }

    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "[\\PC\"\\\\{}\\[\\]:,]{0,12}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                prop::collection::btree_map("[\\PC\"\\\\:,{]{0,8}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn any_value_is_laid_out_as_serde_json_lays_it_out(value in any_json()) {
            same_as_serde(&value);
        }
    }
}
