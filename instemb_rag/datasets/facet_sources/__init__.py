"""Facet groups built from real, general-domain data (../shared/data/facets_general and
stance_args): one module per kind of source, one output format (instemb_rag/datasets/facet_groups.py).

    wording.py     the instruction wordings: templates over an aspect's names (never only its label)
    passages.py    passages as users index them: short sentences joined, long sections cut
    reviews.py     ABSA restaurant and laptop reviews, SubjQA product reviews
    references.py  man pages, numpy/scipy docstrings, PowerShell cmdlet references
    factbook.py    the CIA World Factbook's country fields (held out whole as a new-domain dev set)
    stance.py      PERSPECTRUM claims with supporting and undermining perspectives
    argkp.py       ArgKP debate topics with arguments for and against
    fnc1.py        FNC-1 headlines with article leads that agree or disagree
    build.py       subjects split into training and dev, the files written (`build-facet-groups`)
"""
