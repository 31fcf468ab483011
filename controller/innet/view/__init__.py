"""The live view of a network that `innet net up` holds: its state as JSON and a page."""
