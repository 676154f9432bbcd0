"""rein's Temporal integration: the plugin users install into their own Client and Worker."""
