"""The local moves a STOKE chain draws from, and the AST tools they share."""
