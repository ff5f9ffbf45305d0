mod examples;
mod fragments;
mod robustness;
