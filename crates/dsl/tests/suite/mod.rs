mod examples;
mod fragments;
mod resources;
mod node_kinds;
mod robustness;
