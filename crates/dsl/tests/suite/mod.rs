mod bundle;
mod examples;
mod fragments;
mod node_kinds;
mod resources;
mod robustness;
