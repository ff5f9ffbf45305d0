//! The `when "…"` expression language (DSL.md §5.2). OWNER: graph/template checks.
