//! `{{…}}` references and `${…}` host references (DSL.md §4). OWNER: graph/template checks.
