mod validate;
