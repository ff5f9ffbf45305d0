mod harness;
