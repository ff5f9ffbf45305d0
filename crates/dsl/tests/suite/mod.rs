mod examples;
mod fragments;
mod resources;
mod robustness;
