"""Clouds: :mod:`registry` (the only list), :mod:`base` (what every backend offers), one folder
per cloud with the same files, and :mod:`refresh` (folding API facts into the catalog)."""
