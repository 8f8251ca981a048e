"""NodeGround methods: the SDK (methods.sdk) and one subpackage per method family."""
