//! Schema conformance (DSL.md §3.4): an object holding every declared field with a value of the
//! right type; extra keys are kept. `int` accepts an integral number in i64 range and stores it
//! as an integer (`3.0` becomes `3`).

use iterion_dsl::expr::type_name;
use iterion_dsl::ir::{Schema, ValueType};
use serde_json::{Number, Value};

/// Why a value does not conform; the message names the field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    /// The value is not an object.
    #[error("the output is {found}, not an object")]
    NotAnObject {
        /// The value's type.
        found: &'static str,
    },
    /// A declared field is absent.
    #[error("field \"{field}\" is missing")]
    Missing {
        /// The field.
        field: String,
    },
    /// A field has the wrong type.
    #[error("field \"{field}\" must be {expected}, found {found}")]
    WrongType {
        /// The field.
        field: String,
        /// The declared type.
        expected: &'static str,
        /// What the value is.
        found: String,
    },
    /// A string field with `[enum: …]` holds another string.
    #[error("field \"{field}\" must be one of {allowed}, found {found:?}")]
    NotInEnum {
        /// The field.
        field: String,
        /// The allowed values, quoted and comma-separated.
        allowed: String,
        /// The value found (at most 80 chars).
        found: String,
    },
}

/// Checks `value` against `schema` and returns it normalised (integral floats in `int` fields
/// become integers).
pub fn conform(schema: &Schema, value: Value) -> Result<Value, Violation> {
    let Value::Object(mut map) = value else {
        return Err(Violation::NotAnObject {
            found: type_name(&value),
        });
    };
    for field in &schema.fields {
        let Some(v) = map.get(&field.name) else {
            return Err(Violation::Missing {
                field: field.name.clone(),
            });
        };
        let wrong = |found: String| Violation::WrongType {
            field: field.name.clone(),
            expected: field.ty.as_str(),
            found,
        };
        let normalised = match (field.ty, v) {
            (ValueType::Json, _) => None,
            (ValueType::String, Value::String(text)) => {
                if let Some(allowed) = &field.enum_values
                    && !allowed.iter().any(|a| a == text)
                {
                    return Err(Violation::NotInEnum {
                        field: field.name.clone(),
                        allowed: allowed
                            .iter()
                            .map(|a| format!("{a:?}"))
                            .collect::<Vec<_>>()
                            .join(", "),
                        found: text.chars().take(80).collect(),
                    });
                }
                None
            }
            (ValueType::Bool, Value::Bool(_)) => None,
            (ValueType::Float, Value::Number(_)) => None,
            (ValueType::Int, Value::Number(n)) => match integral(n) {
                Some(i) if n.as_i64() == Some(i) => None,
                Some(i) => Some(Value::Number(Number::from(i))),
                None => return Err(wrong(format!("the number {n}"))),
            },
            (ValueType::StringList, Value::Array(items)) => {
                match items.iter().position(|i| !i.is_string()) {
                    None => None,
                    Some(at) => {
                        return Err(wrong(format!(
                            "a list whose item {at} is {}",
                            items.get(at).map_or("absent", type_name)
                        )));
                    }
                }
            }
            (_, other) => return Err(wrong(type_name(other).to_owned())),
        };
        if let Some(n) = normalised {
            map.insert(field.name.clone(), n);
        }
    }
    Ok(Value::Object(map))
}

/// The i64 an integral number in i64 range stands for.
fn integral(n: &Number) -> Option<i64> {
    if let Some(i) = n.as_i64() {
        return Some(i);
    }
    if n.is_u64() {
        return None;
    }
    let f = n.as_f64()?;
    // 2^63 is exactly representable; i64's range is [-2^63, 2^63).
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    (f.fract() == 0.0 && (-LIMIT..LIMIT).contains(&f)).then_some(f as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use iterion_dsl::ir::SchemaField;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn schema(fields: &[(&str, ValueType)]) -> Schema {
        Schema {
            fields: fields
                .iter()
                .map(|(n, t)| SchemaField {
                    name: (*n).to_owned(),
                    ty: *t,
                    enum_values: None,
                })
                .collect(),
        }
    }

    #[test]
    fn an_enum_field_refuses_other_strings() {
        let mut s = schema(&[("level", ValueType::String)]);
        s.fields[0].enum_values = Some(vec!["low".to_owned(), "high".to_owned()]);
        assert_eq!(
            conform(&s, json!({"level": "high"})),
            Ok(json!({"level": "high"}))
        );
        assert_eq!(
            conform(&s, json!({"level": "medium"})).map_err(|e| e.to_string()),
            Err("field \"level\" must be one of \"low\", \"high\", found \"medium\"".to_owned())
        );
    }

    #[test]
    fn conforming_values_are_normalised_and_keep_extra_keys() {
        let s = schema(&[
            ("n", ValueType::Int),
            ("f", ValueType::Float),
            ("l", ValueType::StringList),
            ("j", ValueType::Json),
        ]);
        assert_eq!(
            conform(&s, json!({"n": 3.0, "f": 1, "l": ["a"], "j": null, "x": 1})),
            Ok(json!({"n": 3, "f": 1, "l": ["a"], "j": null, "x": 1}))
        );
    }

    #[test]
    fn violations_name_the_field() {
        let s = schema(&[("ok", ValueType::Bool), ("n", ValueType::Int)]);
        let cases = [
            (json!([1]), "the output is list, not an object"),
            (json!({"n": 1}), "field \"ok\" is missing"),
            (
                json!({"ok": null, "n": 1}),
                "field \"ok\" must be bool, found null",
            ),
            (
                json!({"ok": true, "n": 1.5}),
                "field \"n\" must be int, found the number 1.5",
            ),
            (
                json!({"ok": true, "n": 1e19}),
                "field \"n\" must be int, found the number 1e+19",
            ),
        ];
        for (value, want) in cases {
            assert_eq!(
                conform(&s, value).map_err(|e| e.to_string()),
                Err(want.to_owned())
            );
        }
        let l = schema(&[("l", ValueType::StringList)]);
        assert_eq!(
            conform(&l, json!({"l": ["a", 2]})).map_err(|e| e.to_string()),
            Err("field \"l\" must be string[], found a list whose item 1 is number".to_owned())
        );
    }
}
