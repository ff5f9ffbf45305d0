mod driver;
