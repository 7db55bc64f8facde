"""Two spaces, one prefill (issue 50): train the query side of a TwoSpacesEncoder on document vectors cached in both spaces."""
