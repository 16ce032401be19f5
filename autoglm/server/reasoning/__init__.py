"""Reasoning read out of a model's text: the thinking it writes between markers, apart from its answer."""
