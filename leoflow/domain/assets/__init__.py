"""Assets: data a task produces or consumes, named by URI, and what their events trigger."""
