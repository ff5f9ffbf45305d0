mod bundle;
mod examples;
mod fragments;
mod legacy;
mod node_kinds;
mod resources;
mod robustness;
