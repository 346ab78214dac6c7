"""audiocpp.book: `audiocpp book`, a book file to a chaptered audiobook (docs/book.md)."""
