"""What the data is: the errors, ids, result types and the document schemas. Imports nothing of brain above it."""
