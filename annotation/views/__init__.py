"""Server-rendered annotation pages: the home page (`home`) and the annotator task pages with the
JSON calls their script makes (`task_pages`)."""
