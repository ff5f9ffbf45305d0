//! Tokens, indentation, strings, block scalars, prompt bodies (DSL.md §1). OWNER: parse stage.
