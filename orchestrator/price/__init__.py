"""The price of a sweep before it runs."""
