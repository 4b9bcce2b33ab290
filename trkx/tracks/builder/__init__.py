"""Track building: the scored hit graph, the walkthrough and connected components, the extension,
stitching and the second pass, one track id per hit."""
