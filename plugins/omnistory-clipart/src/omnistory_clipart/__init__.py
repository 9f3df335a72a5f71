"""omnistory-clipart: ``image=clipart``, an image expert that needs no GPU and no hub download."""
