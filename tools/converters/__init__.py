"""Running the C++ ports' own converters against audiocpp (issue #18; maintainer tool)."""
