mod examples;
mod fragments;
mod node_kinds;
mod robustness;
